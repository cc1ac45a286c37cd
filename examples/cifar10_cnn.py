"""Training a classifier on CIFAR-10: the PyTorch "Training a Classifier" tutorial, end to end.

1. Load and normalize CIFAR-10 with ``dynograph.vision`` (augmenting the training images).
2. Define a convolutional neural network.
3. Define a loss function (cross-entropy) and an optimizer (SGD with momentum).
4. Train the network on the training data, logging to TensorBoard.
5. Save the trained weights, load them back, and test the network on the test data.

    python examples/cifar10_cnn.py --data DIR     # DIR holds cifar-10-batches-py (downloaded if missing)
    python examples/cifar10_cnn.py --compile      # compile the training step
    python examples/cifar10_cnn.py --smoke        # a tiny run on FakeData, with checks (for CI)
    tensorboard --logdir runs                     # look at the logged curves

As in the tutorial the DataLoaders use two worker processes and this script has no
``if __name__ == "__main__":`` guard: on Linux the workers are forked and do not re-run it.
"""
import argparse

import dynograph as torch
import dynograph.nn as nn
import dynograph.nn.functional as F
import dynograph.optim as optim
import dynograph.vision as vision
import dynograph.vision.transforms as transforms
from dynograph.utils.tensorboard import SummaryWriter

from _progress import Progress, timed_first_call

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--data", default="./data", help="folder with (or for) cifar-10-batches-py")
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--compile", action="store_true", help="compile the training step")
parser.add_argument("--smoke", action="store_true", help="a tiny run on FakeData, with checks (for CI)")
parser.add_argument("--logdir", default="runs/cifar10_cnn", help="TensorBoard log folder")
parser.add_argument("--checkpoint", default="./cifar_net.pth", help="where to save the weights")
args = parser.parse_args()
torch.manual_seed(0)

# --- 1. Load and normalize CIFAR-10 ---------------------------------------------------------
# The datasets give PIL images in [0, 1] after ToTensor; Normalize maps them to [-1, 1].
# Training images are also randomly flipped and shifted (augmentation), test images are not.
normalize = transforms.Normalize((0.5, 0.5, 0.5), (0.5, 0.5, 0.5))
train_transform = transforms.Compose([
    transforms.RandomHorizontalFlip(),
    transforms.RandomCrop(32, padding=4),
    transforms.ToTensor(),
    normalize,
])
test_transform = transforms.Compose([transforms.ToTensor(), normalize])

batch_size = 4
log_every = 2000            # print the running loss every 2000 mini-batches, as the tutorial does

if args.smoke:
    # Random images of CIFAR's shape.  Random images have nothing to generalize from, so the
    # "test set" is the training images themselves: learning them shows the network learns.
    args.epochs, batch_size, log_every = 10, 8, 4
    trainset = vision.datasets.FakeData(size=64, image_size=(3, 32, 32), num_classes=10,
                                        transform=transforms.Compose([transforms.ToTensor(), normalize]))
    testset = vision.datasets.FakeData(size=64, image_size=(3, 32, 32), num_classes=10,
                                       transform=test_transform)
else:
    trainset = vision.datasets.CIFAR10(root=args.data, train=True, download=True, transform=train_transform)
    testset = vision.datasets.CIFAR10(root=args.data, train=False, download=True, transform=test_transform)

trainloader = torch.utils.data.DataLoader(trainset, batch_size=batch_size, shuffle=True, num_workers=2)
testloader = torch.utils.data.DataLoader(testset, batch_size=batch_size, shuffle=False, num_workers=2)

classes = ("plane", "car", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")


# --- 2. Define a convolutional neural network -----------------------------------------------
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)     # flatten all dimensions except batch
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        x = self.fc3(x)
        return x


net = Net()
print(net)

# --- 3. Define a loss function and optimizer ------------------------------------------------
criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.05 if args.smoke else 0.001, momentum=0.9)

# TensorBoard: a grid of training images, the model's graph, then the loss curve.
writer = SummaryWriter(args.logdir)
images, labels = next(iter(trainloader))
writer.add_image("four_cifar10_images", vision.utils.make_grid(images / 2 + 0.5))
writer.add_graph(net, images)


# --- 4. Train the network -------------------------------------------------------------------
def train_step(inputs, labels):
    optimizer.zero_grad()               # zero the parameter gradients
    outputs = net(inputs)               # forward
    loss = criterion(outputs, labels)
    loss.backward()                     # backward
    optimizer.step()                    # optimize
    return loss


if args.compile:
    # One graph for forward, backward and the SGD update; the first call traces and compiles it.
    train_step = timed_first_call(torch.compile(train_step))

epoch_losses = []
for epoch in range(args.epochs):        # loop over the dataset multiple times
    running_loss, epoch_loss = 0.0, 0.0
    bar = Progress(trainloader, desc=f"epoch {epoch + 1}", unit="img")
    for i, data in enumerate(bar, 0):
        inputs, labels = data           # data is a list of [inputs, labels]
        loss = train_step(inputs, labels).item()
        bar.update(loss=loss, items=len(labels))

        running_loss += loss
        epoch_loss += loss
        if i % log_every == log_every - 1:
            print(f"[{epoch + 1}, {i + 1:5d}] loss: {running_loss / log_every:.3f}")
            writer.add_scalar("training loss", running_loss / log_every, epoch * len(trainloader) + i)
            running_loss = 0.0
    epoch_losses.append(epoch_loss / len(trainloader))

print("Finished Training")
writer.close()

# --- 5. Save, load back and test ------------------------------------------------------------
PATH = args.checkpoint
torch.save(net.state_dict(), PATH)

net = Net()
net.load_state_dict(torch.load(PATH, weights_only=True))

correct = 0
total = 0
correct_pred = {classname: 0 for classname in classes}
total_pred = {classname: 0 for classname in classes}
# no training here, so no gradients are needed
with torch.no_grad():
    for data in testloader:
        images, labels = data
        outputs = net(images)
        # the class with the highest energy is what we choose as prediction
        _, predicted = torch.max(outputs, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()
        for label, prediction in zip(labels, predicted):
            if label == prediction:
                correct_pred[classes[label]] += 1
            total_pred[classes[label]] += 1

accuracy = 100 * correct // total
print(f"Accuracy of the network on the {total} test images: {accuracy} %")
for classname, correct_count in correct_pred.items():
    if total_pred[classname]:
        class_accuracy = 100 * float(correct_count) / total_pred[classname]
        print(f"Accuracy for class: {classname:5s} is {class_accuracy:.1f} %")

if args.smoke:
    assert epoch_losses[-1] < epoch_losses[0], epoch_losses
    assert accuracy > 20, f"accuracy {accuracy} % is not above chance (10 %)"
    print(f"smoke: loss {epoch_losses[0]:.3f} -> {epoch_losses[-1]:.3f}, accuracy {accuracy} % > 10 % chance")
